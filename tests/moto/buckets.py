"""Create a bucket the way S3 requires in the client's region (outside us-east-1 it needs a LocationConstraint)."""

from __future__ import annotations

from typing import Any


def ensure_bucket(s3: Any, bucket: str) -> None:
    if bucket in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        return
    region = s3.meta.region_name
    if region == "us-east-1":
        s3.create_bucket(Bucket=bucket)
    else:  # https://docs.aws.amazon.com/AmazonS3/latest/API/API_CreateBucket.html (LocationConstraint)
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
