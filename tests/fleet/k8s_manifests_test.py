"""`feedtune fleet k8s`: its manifests are valid against the Kubernetes API's
schema (k8s_schema.py: the official client's generated models and the
Kubernetes OpenAPI spec, both from Debian), say what the issue asks for
(Indexed Job, one pod per node, memory-backed /dev/shm, GPUs, ConfigMap,
results volume), and the validator rejects broken ones, so a pass means
something.

    python3 k8s_manifests_test.py FEEDTUNE_BINARY SOURCE_DIR
"""
import copy
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_schema  # noqa: E402

FEEDTUNE, SOURCE_DIR = sys.argv[1], sys.argv[2]
CONFIG = os.path.join(SOURCE_DIR, "tests", "fleet", "tiny.yaml")


def fleet_k8s(*extra):
    return subprocess.run([FEEDTUNE, "fleet", "k8s", "--config", CONFIG, *extra],
                          capture_output=True, text=True)


def manifests(*extra):
    result = fleet_k8s(*extra)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d is not None]


class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = manifests("--nodes", "3", "--image", "registry.example/feedtune:1", "--results-pvc",
                             "fleet-results", "--gpus-per-node", "8", "--shm-size", "16Gi")
        cls.config_map, cls.job, cls.merge = cls.docs

    def test_every_document_is_valid_for_its_kind(self):
        self.assertEqual([d["kind"] for d in self.docs], ["ConfigMap", "Job", "Job"])
        for doc in self.docs:
            self.assertEqual(k8s_schema.check(doc), [], doc["metadata"]["name"])

    def test_without_gpus_too(self):
        docs = manifests("--nodes", "1", "--image", "feedtune", "--results-pvc", "r")
        for doc in docs:
            self.assertEqual(k8s_schema.check(doc), [])
        self.assertNotIn("resources", docs[1]["spec"]["template"]["spec"]["containers"][0])

    def test_the_validator_program_passes_the_printed_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(fleet_k8s("--nodes", "2", "--image", "i", "--results-pvc", "r").stdout)
            f.flush()
            run = subprocess.run([sys.executable, k8s_schema.__file__, f.name], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stdout)
        self.assertEqual(run.stdout.count(": valid"), 3, run.stdout)

    def test_indexed_job_one_pod_per_node(self):
        spec = self.job["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        self.assertEqual((spec["completions"], spec["parallelism"]), (3, 3))
        pod = spec["template"]["spec"]
        term = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        self.assertEqual(term["topologyKey"], "kubernetes.io/hostname")
        # The anti-affinity selects this Job's own pods.
        for key, value in term["labelSelector"]["matchLabels"].items():
            self.assertEqual(spec["template"]["metadata"]["labels"][key], value)
        # ... and not the merge pod, which may share a node with a sweep.
        self.assertNotIn("feedtune/fleet", self.merge["spec"]["template"]["metadata"]["labels"])

    def test_shm_gpus_config_and_results(self):
        pod = self.job["spec"]["template"]["spec"]
        container = pod["containers"][0]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        self.assertEqual(volumes[mounts["/dev/shm"]]["emptyDir"], {"medium": "Memory", "sizeLimit": "16Gi"})
        self.assertEqual(container["resources"]["limits"], {"nvidia.com/gpu": "8"})
        self.assertEqual(volumes[mounts["/results"]]["persistentVolumeClaim"]["claimName"], "fleet-results")
        self.assertEqual(volumes[mounts["/etc/feedtune"]]["configMap"]["name"], self.config_map["metadata"]["name"])
        with open(CONFIG) as f:
            self.assertEqual(self.config_map["data"]["config.yaml"], f.read())
        script = container["command"][2]
        self.assertIn("--config /etc/feedtune/config.yaml", script)
        self.assertIn('/results/sweep-"$host"-task"$task".db', script)
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
        self.assertEqual(env["NODE_NAME"], "spec.nodeName")
        merge_script = self.merge["spec"]["template"]["spec"]["containers"][0]["command"][2]
        self.assertIn("nodes=3", merge_script)
        self.assertIn("fleet.html", merge_script)

    def test_bad_input_is_refused_with_exit_2(self):
        cases = [(["--nodes", "2", "--image", "i", "--results-pvc", "r", "--name", "Fleet_1"], "Kubernetes names"),
                 (["--nodes", "2", "--image", "i", "--results-pvc", "r", "--shm-size", "8GB"], "quantity"),
                 (["--nodes", "0", "--image", "i", "--results-pvc", "r"], "--nodes must be")]
        for args, words in cases:
            result = fleet_k8s(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertIn(words, result.stderr)
        missing = subprocess.run([FEEDTUNE, "fleet", "k8s", "--config", "/nonexistent/c.yaml", "--nodes", "2",
                                  "--image", "i", "--results-pvc", "r"], capture_output=True, text=True)
        self.assertEqual(missing.returncode, 2)
        self.assertIn("/nonexistent/c.yaml", missing.stderr)


class PodScriptsRunByHand(unittest.TestCase):
    """The sweep pods' and the merge pod's scripts, run here with /results and
    the ConfigMap's path moved to a temporary folder: index 0 on node-a sweeps,
    index 1 on node-b gets a missing config; the merge waits for both, then
    gathers node-a's run and names index 1 as missing."""

    def test_a_failing_index_does_not_stop_the_merge(self):
        docs = manifests("--nodes", "2", "--image", "i", "--results-pvc", "r", "--feedtune", FEEDTUNE)
        sweep = docs[1]["spec"]["template"]["spec"]["containers"][0]["command"]
        merge = docs[2]["spec"]["template"]["spec"]["containers"][0]["command"]
        self.assertEqual(sweep[:2], ["/bin/sh", "-c"])
        with tempfile.TemporaryDirectory() as tmp:
            results = os.path.join(tmp, "results")
            os.mkdir(results)

            def run(script, env, config=CONFIG):
                text = script.replace("/results", results).replace("/etc/feedtune/config.yaml", config)
                return subprocess.run(["/bin/sh", "-c", text], env={**os.environ, **env}, capture_output=True,
                                      text=True, timeout=120)

            first = run(sweep[2], {"JOB_COMPLETION_INDEX": "0", "NODE_NAME": "node-a"})
            self.assertEqual(first.returncode, 0, first.stderr)
            failed = run(sweep[2], {"JOB_COMPLETION_INDEX": "1", "NODE_NAME": "node-b"}, config="/nonexistent.yaml")
            self.assertEqual(failed.returncode, 0, "a failing sweep must not fail its pod")
            merged = run(merge[2], {})
            self.assertEqual(merged.returncode, 0, merged.stdout + merged.stderr)
            with open(os.path.join(results, "fleet-summary.txt")) as f:
                summary = f.read()
            self.assertIn("2 tasks, 1 succeeded, 1 missing; 1 results file(s) merged", summary)
            self.assertIn("task 1: missing: the sweep on node-b exited 2", summary)
            self.assertTrue(os.path.exists(os.path.join(results, "sweep-node-a-task0.db")))
            with open(os.path.join(results, "fleet.html")) as f:
                self.assertIn('data-host="node-a"', f.read())


class TheValidatorRejects(unittest.TestCase):
    """Broken variants of the printed Job: each must fail the schema check."""

    @classmethod
    def setUpClass(cls):
        cls.job = manifests("--nodes", "2", "--image", "i", "--results-pvc", "r", "--gpus-per-node", "1")[1]

    def broken(self, change):
        doc = copy.deepcopy(self.job)
        change(doc)
        return k8s_schema.check(doc)

    def test_a_value_of_the_wrong_type(self):
        def change(d):
            d["spec"]["completions"] = "2"
        self.assertTrue(self.broken(change))
        doc = copy.deepcopy(self.job)
        change(doc)
        self.assertTrue(k8s_schema.check_with_openapi_spec(doc))  # the JSON-schema check alone sees it too

    def test_a_misspelt_field(self):
        def change(d):
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
        errors = self.broken(change)
        self.assertTrue(any("imagePullPolicyy" in e for e in errors), errors)

    def test_a_field_at_the_wrong_level(self):
        def change(d):
            d["spec"]["template"]["spec"]["volumes"][0]["sizeLimit"] = "1Gi"
        self.assertTrue(self.broken(change))

    def test_a_missing_required_field(self):
        def change(d):
            del d["spec"]["template"]["spec"]["containers"][0]["name"]
        self.assertTrue(self.broken(change))
        doc = copy.deepcopy(self.job)
        change(doc)
        self.assertTrue(k8s_schema.check_with_openapi_spec(doc))

    def test_an_unknown_kind(self):
        def change(d):
            d["apiVersion"] = "batch/v9"
        self.assertTrue(self.broken(change))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
