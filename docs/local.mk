# The user manual ships with the sources (allocator.md, replay.md and
# scenario-format.md are listed with the parts they document).
EXTRA_DIST += docs/csv-schemas.md docs/policy-api.md docs/backends.md
EXTRA_DIST += docs/architecture.md docs/validation.md
EXTRA_DIST += docs/torch.md
