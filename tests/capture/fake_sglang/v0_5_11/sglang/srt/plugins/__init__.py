from fake_sglang_shared.plugins import (
    GENERAL_PLUGINS_GROUP,
    PLATFORM_PLUGINS_GROUP,
    load_plugins,
)

__all__ = ["GENERAL_PLUGINS_GROUP", "PLATFORM_PLUGINS_GROUP", "load_plugins"]
