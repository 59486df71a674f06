"""The `matmul` family: out = a b^T of bf16 token rows a [M, K] and weights b [N, K], accumulated in fp32."""
