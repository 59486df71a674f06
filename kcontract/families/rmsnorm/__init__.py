"""The `rmsnorm` family: y = h w / sqrt(mean(h^2) + eps), h = x or the fused residual sum x + r."""
