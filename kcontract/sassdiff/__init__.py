"""`kcontract sass-diff`: compile two revisions for every SM and compare machine code function by function."""
