"""An example kernel family outside the kcontract package: row sums of a bf16 matrix in fp32 (docs/families.md)."""
