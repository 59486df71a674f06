"""Shared pytest settings: no Hypothesis deadline, since a loaded 2-core CI machine stalls at random."""

from hypothesis import settings

settings.register_profile("kcontract", deadline=None, print_blob=True)
settings.load_profile("kcontract")
