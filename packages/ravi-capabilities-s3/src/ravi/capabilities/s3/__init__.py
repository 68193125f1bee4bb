"""S3 blob store for Ravi, registered under the name ``s3``: :class:`S3FileStore`.

Runs on AWS S3, MinIO, SeaweedFS or any S3-compatible store; :class:`~ravi.capabilities.s3.local.LocalS3`
starts a throwaway SeaweedFS from the ``[local]`` extra.
"""

from ravi.capabilities.s3.store import S3FileStore

__all__ = ["S3FileStore"]
