"""An S3 endpoint for tests: moto's server in a thread of the test process (tests only).

Lance (Rust object_store), pyarrow's S3 filesystem and Spark's Python workers all reach it over
HTTP, like a real bucket; nothing is mocked inside our code.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Dict, Iterator

REGION = "us-east-1"
ACCESS_KEY = "testing-key-id"
SECRET_KEY = "testing-secret-key"


@dataclass(frozen=True)
class S3Endpoint:
    url: str

    def storage_options(self) -> Dict[str, str]:
        """What a user passes as ``storage.*`` options / ``storage_options``."""
        return {"aws_endpoint": self.url, "allow_http": "true", "aws_region": REGION,
                "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def new_bucket(self) -> str:
        name = f"graphs-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for p in pages for o in p.get("Contents", []))


def serve() -> Iterator[S3Endpoint]:
    """Start moto's S3 server on a free local port; stop it when the generator closes."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one INFO line per HTTP request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Endpoint(f"http://{host}:{port}")
    finally:
        server.stop()
