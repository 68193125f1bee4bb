"""Apache AGE graph store for Ravi: knowledge graphs with openCypher on PostgreSQL.

Not implemented yet: this package registers no backend, so ``load_backend(..., "age")`` says so clearly.
Planned: AGEGraphStore.
"""

__all__: list[str] = []
