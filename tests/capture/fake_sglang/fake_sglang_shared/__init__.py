"""Stand-ins shared by the fake SGLang trees (see ../README.md)."""
