"""The family interface: what a kernel family gives the gates, and where families are found."""
