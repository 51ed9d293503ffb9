#!/usr/bin/python3
"""Validates Kubernetes manifests against the Kubernetes API's own schema, from
two Debian packages (scripts/setup-deps --fleet), no hand-written rules:

1. python3-kubernetes (the official client, 22.6 = Kubernetes API 1.22): its
   model classes are generated from the API's OpenAPI spec. A document is
   deserialized into the model of its kind with the client's validation on
   (required fields), then serialized back; whatever does not come back the
   same is a field the API does not have (a typo, a wrong level) or a value of
   the wrong type. 1.22 knows completionMode: Indexed.
2. python3-jsonschema against the Swagger 2.0 spec of Kubernetes v1.13 that
   golang-k8s-kube-openapi-dev ships (its schemaconv test data): each document
   against the definition of its group/version/kind (types, required fields).
   That spec predates Indexed Jobs and allows unknown fields, so it checks what
   1.13 already had; check 1 is the strict one.

Usage as a program: /usr/bin/python3 k8s_schema.py FILE.yaml  (exit 0 valid, 1 not).
"""
import json
import os
import sys

import jsonschema
import yaml
from kubernetes import client

KUBE_OPENAPI_SPEC = ("/usr/share/gocode/src/k8s.io/kube-openapi/pkg/schemaconv/"
                     "testdata/swagger.json")


def _model_name(doc):
    """'batch/v1' + 'Job' -> 'V1Job', as the client names its models."""
    version = doc["apiVersion"].rpartition("/")[2]
    return version[0].upper() + version[1:] + doc["kind"]


def _differences(original, round_trip, path):
    """Where the round trip through the model lost or changed something."""
    if isinstance(original, dict):
        if not isinstance(round_trip, dict):
            return [f"{path}: expected an object, got {type(original).__name__}"]
        found = []
        for key, value in original.items():
            if key not in round_trip:
                found.append(f"{path}.{key}: not a field of the Kubernetes 1.22 API here")
            else:
                found += _differences(value, round_trip[key], f"{path}.{key}")
        return found
    if isinstance(original, list):
        if not isinstance(round_trip, list) or len(round_trip) != len(original):
            return [f"{path}: expected a list"]
        found = []
        for i, (a, b) in enumerate(zip(original, round_trip)):
            found += _differences(a, b, f"{path}[{i}]")
        return found
    if type(original) is not type(round_trip) or original != round_trip:
        return [f"{path}: {original!r} has the wrong type for this field (the API reads it as {round_trip!r})"]
    return []


def check_with_client_models(doc):
    name = _model_name(doc)
    if not hasattr(client, name):
        return [f"{doc.get('apiVersion')}/{doc.get('kind')}: no such kind in the Kubernetes 1.22 API"]
    api = client.ApiClient()
    try:
        model = api._ApiClient__deserialize(doc, name)  # the client's own decoder, with its validation
    except (ValueError, TypeError) as e:
        return [f"{name}: {e}"]
    return _differences(doc, api.sanitize_for_serialization(model), doc["kind"])


_spec_definitions = None


def check_with_openapi_spec(doc):
    global _spec_definitions
    if _spec_definitions is None:
        with open(KUBE_OPENAPI_SPEC) as f:
            _spec_definitions = json.load(f)["definitions"]
    group, _, version = doc["apiVersion"].rpartition("/")
    matches = [
        key for key, definition in _spec_definitions.items()
        if {"group": group, "version": version, "kind": doc["kind"]} in
        definition.get("x-kubernetes-group-version-kind", [])
    ]
    if not matches:
        return [f"{doc['apiVersion']}/{doc['kind']}: no such kind in the Kubernetes v1.13 OpenAPI spec"]
    schema = {"$ref": f"#/definitions/{matches[0]}", "definitions": _spec_definitions}
    validator = jsonschema.Draft4Validator(schema)
    return [f"{doc['kind']}.{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
            for e in validator.iter_errors(doc)]


def check(doc):
    """Every schema error of one manifest, as readable lines (empty: valid)."""
    if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
        return ["not a Kubernetes object (apiVersion and kind needed)"]
    return check_with_client_models(doc) + check_with_openapi_spec(doc)


def main(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    failed = False
    for doc in docs:
        errors = check(doc)
        name = f"{doc.get('kind')} {doc.get('metadata', {}).get('name')}"
        print(f"{path}: {name}: " + ("valid" if not errors else "INVALID"))
        for e in errors:
            print(f"  {e}")
        failed |= bool(errors)
    return 1 if failed or not docs else 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.exists(sys.argv[1]):
        print("usage: k8s_schema.py MANIFESTS.yaml", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
