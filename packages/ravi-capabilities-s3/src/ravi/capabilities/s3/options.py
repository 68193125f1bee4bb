"""The options of ``S3FileStore``: types, documentation and defaults in one model.

The same model checks ``ravi.toml``, ``RAVI_BLOB__<KEY>`` variables (strings, converted here:
``RAVI_BLOB__CREATE_BUCKET=false`` is the boolean false, not a non-empty string) and keyword arguments, and the
configuration page's table is generated from it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ravi.kernel.options import BackendOptions
from ravi.kernel.storage import MAX_KEY_BYTES, check_blob_key


class S3Options(BackendOptions):
    """The options of ``S3FileStore`` (``[blob] backend = "s3"``)."""

    bucket: str = Field(
        min_length=1, description="The bucket; created on connect with `create_bucket`, else it must exist."
    )
    endpoint_url: str | None = Field(
        None, description="For MinIO, SeaweedFS and other compatible stores (none for AWS)."
    )
    region: str | None = Field(
        None, description="The region name (none: `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`)."
    )
    access_key: str | None = Field(None, description="The access key (none: boto3's usual credential chain).")
    secret_key: str | None = Field(None, description="The secret key (none: boto3's usual credential chain).")
    addressing_style: Literal["path", "virtual", "auto"] = Field("auto", description="How buckets are addressed.")
    key_prefix: str = Field(
        "", description="Prepended to every key: empty, or ending with `/` (`app1/`), so no app's keys are another's."
    )
    create_bucket: bool = Field(False, description="Create the bucket on connect when it is missing.")
    multipart_threshold: int = Field(8 * 1024 * 1024, ge=1, description="Bytes above which uploads are multipart.")
    timeout: float = Field(
        30.0, gt=0, description="Seconds to wait to connect, and for each answer (`BackendUnavailable`)."
    )
    max_attempts: int = Field(1, ge=1, description="Tries per call (1: no retry, so `timeout` bounds the wait).")
    lifecycle_rules: bool = Field(
        True, description="Tag expiring blobs and add bucket lifecycle rules that remove them."
    )

    @field_validator("bucket")
    @classmethod
    def _a_bucket_name(cls, bucket: str) -> str:
        # botocore's own rule, which it applies to every request: refused there, a bad name was a generic
        # RaviError at the first call instead of a configuration error when the store is built
        from botocore.exceptions import ParamValidationError
        from botocore.handlers import validate_bucket_name

        try:
            validate_bucket_name({"Bucket": bucket})
        except ParamValidationError:
            raise ValueError(
                f"{bucket!r} is not a bucket name: use letters, digits, '.', '-' and '_' (or an access point ARN)"
            ) from None
        return bucket

    @field_validator("endpoint_url")
    @classmethod
    def _an_endpoint(cls, url: str | None) -> str | None:
        # botocore's own rule, which it applies when the client is made: refused there, the first call raised a
        # bare ValueError
        from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

        if url is not None and not (is_valid_endpoint_url(url) or is_valid_ipv6_endpoint_url(url)):
            raise ValueError(f"{url!r} is not an endpoint URL, such as 'http://localhost:9000'")
        return url

    @field_validator("region")
    @classmethod
    def _a_region(cls, region: str | None) -> str | None:
        from botocore.exceptions import InvalidRegionError
        from botocore.utils import validate_region_name

        if region is None:
            return None
        try:
            validate_region_name(region)
        except InvalidRegionError:
            raise ValueError(f"{region!r} is not a region name, such as 'us-east-1'") from None
        return region

    @field_validator("key_prefix")
    @classmethod
    def _a_folder(cls, prefix: str) -> str:
        # without the slash, app "app1" forgetting agent "042" removed app "app10"'s agent "42" (both app1042/)
        if prefix == "":
            return prefix
        if not prefix.endswith("/"):
            raise ValueError(
                f"must be empty or end with '/' (such as {prefix + '/'!r}), so no app's keys are another's"
            )
        check_blob_key(prefix[:-1])  # the same rules as a key: no backslash, no empty, '.' or '..' segment
        size = len(prefix.encode("utf-8"))
        if size >= MAX_KEY_BYTES:  # S3's limit counts the prefix: no key would fit after it
            raise ValueError(
                f"takes {size} UTF-8 bytes, and S3 keeps {MAX_KEY_BYTES} in all: no key would fit after it"
            )
        return prefix


__all__ = ["S3Options"]
