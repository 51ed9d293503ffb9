"""Objects of an s3:// or http(s):// prefix, read by ranges, for feedtune.data
(docs/storage.md#in-the-job).

    store = objects.open_prefix("s3://bucket/train-tar")
    store.get("feedtune-dataset.json")             # the whole object
    store.get("data-00000-of-00016.tar", 512, 100)  # bytes 512..611
    store.get_many([(key, offset, size), ...], in_flight=16)

s3:// is read with boto3 (Debian's python3-boto3), configured as the AWS tools
and the native reader are (storage/credentials.h): keys, profile and region
from the environment and ~/.aws; the endpoint from AWS_ENDPOINT_URL_S3 or
AWS_ENDPOINT_URL (read here: botocore 1.29 does not), path-style there.
http(s):// is read with urllib, a Range header per read: a plain server has
no listing, and feedtune.data needs none (the manifest names the files).

A client belongs to the process that made it: each process (a DataLoader
worker after its fork) makes its own on first use, and none crosses a fork
or a pickle. Errors name the object and the cause, and say what to change.
"""

import concurrent.futures
import os
import threading
import urllib.error
import urllib.request


_INHERITED = []  # clients a process inherited through fork (see _Prefix.client)


class StoreError(Exception):
    """A read failed; the message names the object, the cause and the fix."""


def is_remote(path):
    return isinstance(path, str) and path.startswith(("s3://", "http://", "https://"))


def open_prefix(url):
    """The store under URL (s3://bucket/prefix or http(s)://host/path), as a folder."""
    if url.startswith("s3://"):
        return S3Prefix(url)
    if url.startswith(("http://", "https://")):
        return HttpPrefix(url)
    raise StoreError("%s: not an object store address (s3://bucket/prefix, http:// or https://)" % url)


class _Prefix:
    """What both stores share: keys under one prefix, a client per process,
    many ranges with a number of them in flight."""

    def __init__(self, url):
        self.url = url.rstrip("/")
        self._pid = None
        self._client = None
        self._pool = None
        self._pool_size = 0
        self._lock = threading.Lock()

    def name(self, key):
        return self.url + "/" + key

    def client(self):
        if self._pid != os.getpid():
            # Made after a fork in each process; the parent's client, threads
            # and lock (which a parent's thread may have held at the fork) are
            # dropped, not used. The first call in a process is its main
            # thread's: the fetching threads start after it.
            self._lock = threading.Lock()
            if self._client is not None:
                # Kept, unused: collected, its sockets (the parent's too) would each warn.
                _INHERITED.append(self._client)
            self._client, self._pool, self._pool_size = self._make_client(), None, 0
            self._pid = os.getpid()
        return self._client

    def _executor(self, in_flight):
        self.client()
        with self._lock:
            # Exactly `in_flight` threads: a larger pool kept from an earlier
            # call would put more requests in flight than asked.
            if self._pool is None or self._pool_size != in_flight:
                if self._pool is not None:
                    self._pool.shutdown(wait=False)
                self._pool = concurrent.futures.ThreadPoolExecutor(in_flight, thread_name_prefix="feedtune-fetch")
                self._pool_size = in_flight
            return self._pool

    def get_many(self, reads, in_flight):
        """The bytes of each (key, offset, size) in `reads`, in order, with up
        to `in_flight` requests outstanding (one thread each, as torch's own
        worker threads would hold them)."""
        if in_flight <= 1 or len(reads) <= 1:
            return [self.get(*r) for r in reads]
        pool = self._executor(min(in_flight, len(reads)))
        return list(pool.map(lambda r: self.get(*r), reads))

    def __del__(self):
        # This process's own client is closed with the dataset (its kept-alive
        # connections); one inherited through fork is left to the parent.
        if getattr(self, "_pid", None) == os.getpid():
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            close = getattr(self._client, "close", None)
            if close is not None:
                close()

    def __getstate__(self):  # a client does not travel to a spawned worker: it makes its own
        state = dict(self.__dict__)
        state["_pid"], state["_client"], state["_pool"], state["_pool_size"], state["_lock"] = None, None, None, 0, None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _endpoint():
    """The endpoint and where it came from, as the AWS tools read it."""
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None, None
    for variable in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(variable):
            return os.environ[variable], variable
    return None, None


class S3Prefix(_Prefix):
    def __init__(self, url):
        super().__init__(url)
        bucket, _, prefix = url[len("s3://"):].partition("/")
        if not bucket:
            raise StoreError("%s: no bucket (s3://bucket/prefix)" % url)
        self.bucket, self.prefix = bucket, prefix.strip("/")

    def key(self, name):
        return self.prefix + "/" + name if self.prefix else name

    def _make_client(self):
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise StoreError("%s: s3:// is read with boto3, which is not installed: apt-get install python3-boto3"
                             % self.url)
        endpoint, _ = _endpoint()
        config = Config(signature_version="s3v4", max_pool_connections=64,
                        s3={"addressing_style": "path"} if endpoint else {},
                        retries={"mode": "standard", "total_max_attempts": 5})
        return boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)

    def get(self, name, offset=None, size=None):
        from botocore.exceptions import BotoCoreError, ClientError
        arguments = {"Bucket": self.bucket, "Key": self.key(name)}
        if offset is not None:
            arguments["Range"] = "bytes=%d-%d" % (offset, offset + size - 1)
        try:
            body = self.client().get_object(**arguments)["Body"]
            try:
                return body.read()
            finally:
                body.close()
        except ClientError as e:
            raise StoreError(self._explain(name, e)) from None
        except BotoCoreError as e:
            raise StoreError(self._explain_transport(name, e)) from None

    def _explain(self, name, error):
        answer = error.response.get("Error", {})
        code = answer.get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        said = "%s %s" % (status, code) + (": " + answer["Message"] if answer.get("Message") else "")
        where = self.name(name)
        if code in ("NoSuchKey", "404"):
            return "%s: no such object (%s); was it removed since convert wrote it?" % (where, said)
        if code == "NoSuchBucket":
            return "%s: no such bucket '%s' (%s); check the bucket name%s" % (
                where, self.bucket, said, " and the endpoint (%s)" % _endpoint()[1] if _endpoint()[0] else "")
        if code == "SignatureDoesNotMatch":
            return ("%s: %s; the secret access key does not belong to this key id: fix AWS_SECRET_ACCESS_KEY "
                    "(or the profile's aws_secret_access_key)" % (where, said))
        if code == "InvalidAccessKeyId":
            return "%s: %s; the store does not know this key id: check AWS_ACCESS_KEY_ID and the endpoint" % (
                where, said)
        if code in ("InvalidToken", "ExpiredToken"):
            return "%s: %s; the session token was refused: temporary keys need their own, fresh token" % (where, said)
        if code in ("SlowDown", "503"):
            return ("%s: %s still after 5 tries; the store asks for fewer requests per second: lower "
                    "fetch_concurrency x num_workers" % (where, said))
        if status in (401, 403):
            return ("%s: %s; the key may not read this: its IAM or bucket policy must allow s3:GetObject"
                    % (where, said))
        return "%s: %s" % (where, said)

    def _explain_transport(self, name, error):
        from botocore.exceptions import EndpointConnectionError, NoCredentialsError
        where = self.name(name)
        if isinstance(error, NoCredentialsError):
            return ("%s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with "
                    "~/.aws/credentials" % where)
        if isinstance(error, EndpointConnectionError):
            endpoint, source = _endpoint()
            return "%s: %s%s" % (where, error, "; is the endpoint right? %s from %s" % (endpoint, source)
                                 if endpoint else "; check the network and the region")
        return "%s: %s" % (where, error)


class HttpPrefix(_Prefix):
    def _make_client(self):
        return urllib.request.build_opener()

    def get(self, name, offset=None, size=None):
        request = urllib.request.Request(self.name(name))
        if offset is not None:
            request.add_header("Range", "bytes=%d-%d" % (offset, offset + size - 1))
        try:
            with self.client().open(request, timeout=60) as answer:
                if offset is not None and answer.status != 206:
                    raise StoreError("%s: the server answered %d to a range request, not 206: it does not serve "
                                     "ranges, so samples cannot be read one at a time" % (self.name(name),
                                                                                         answer.status))
                return answer.read()
        except urllib.error.HTTPError as e:
            hint = "; check the URL" if e.code == 404 else ""
            raise StoreError("%s: %d %s%s" % (self.name(name), e.code, e.reason, hint)) from None
        except (urllib.error.URLError, OSError) as e:
            raise StoreError("%s: %s; check the host and port" % (self.name(name), getattr(e, "reason", e))) from None
