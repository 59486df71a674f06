"""Small external families for tests, registered by `family: tests.families.<module>:<Class>`."""
