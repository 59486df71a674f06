"""Independent models the tests hold kcontract's own numerics against."""
