"""Mutation testing: mutants of a CUDA entry's source, each a patch, judged by the entry's gates as controls."""
