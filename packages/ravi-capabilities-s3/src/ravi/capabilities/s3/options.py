"""The options of ``S3FileStore``: types, documentation and defaults in one model.

The same model checks ``ravi.toml``, ``RAVI_BLOB__<KEY>`` variables (strings, converted here:
``RAVI_BLOB__CREATE_BUCKET=false`` is the boolean false, not a non-empty string) and keyword arguments, and the
configuration page's table is generated from it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ravi.kernel.options import BackendOptions


class S3Options(BackendOptions):
    """The options of ``S3FileStore`` (``[blob] backend = "s3"``)."""

    bucket: str = Field(
        min_length=1, description="The bucket; created on connect with `create_bucket`, else it must exist."
    )
    endpoint_url: str | None = Field(
        None, description="For MinIO, SeaweedFS and other compatible stores (none for AWS)."
    )
    region: str = Field("us-east-1", description="The region name.")
    access_key: str | None = Field(None, description="The access key (none: boto3's usual credential chain).")
    secret_key: str | None = Field(None, description="The secret key (none: boto3's usual credential chain).")
    addressing_style: Literal["path", "virtual", "auto"] = Field("auto", description="How buckets are addressed.")
    key_prefix: str = Field("", description="Prepended to every key (`app1/`).")
    create_bucket: bool = Field(False, description="Create the bucket on connect when it is missing.")
    multipart_threshold: int = Field(8 * 1024 * 1024, ge=1, description="Bytes above which uploads are multipart.")
    timeout: float = Field(
        30.0, gt=0, description="Seconds to wait to connect, and for each answer (`BackendUnavailable`)."
    )
    max_attempts: int = Field(1, ge=1, description="Tries per call (1: no retry, so `timeout` bounds the wait).")
    lifecycle_rules: bool = Field(
        True, description="Tag expiring blobs and add bucket lifecycle rules that remove them."
    )


__all__ = ["S3Options"]
