"""S3 blob store for Ravi: tool outputs and files on AWS S3, MinIO or any S3-compatible store.

Not implemented yet: this package registers no backend, so ``load_backend(..., "s3")`` says so clearly.
Planned: S3FileStore.
"""

__all__: list[str] = []
