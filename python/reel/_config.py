"""Run and search configs from Python values: a path, text-format protobuf or a dict."""

import os


def _scalar(value, where):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return '"' + escaped + '"'
    raise TypeError(f"config: {where} must be a str, number, bool, dict or list, "
                    f"not {type(value).__name__}")


def _fields(d, prefix, lines, indent):
    pad = "  " * indent
    for key, value in d.items():
        if not isinstance(key, str):
            raise TypeError(f"config: keys must be str, got {key!r} in {prefix or 'the config'}")
        where = f"{prefix}.{key}" if prefix else key
        if key == "options" and isinstance(value, dict):
            # map<string, string>: every value as a string, as in a .pbtxt file.
            for k, v in value.items():
                text = v if isinstance(v, str) else _scalar(v, f"{where}.{k}").strip('"')
                lines.append(f"{pad}options {{ key: {_scalar(str(k), where)} "
                             f"value: {_scalar(text, where)} }}")
        elif isinstance(value, dict):
            lines.append(f"{pad}{key} {{")
            _fields(value, where, lines, indent + 1)
            lines.append(f"{pad}}}")
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, dict):
                    lines.append(f"{pad}{key} {{")
                    _fields(item, where, lines, indent + 1)
                    lines.append(f"{pad}}}")
                else:
                    lines.append(f"{pad}{key}: {_scalar(item, where)}")
        else:
            lines.append(f"{pad}{key}: {_scalar(value, where)}")


def dict_to_text(config: dict) -> str:
    """Text-format protobuf for a dict shaped like the message (``options`` maps as dicts)."""
    lines = []
    _fields(config, "", lines, 0)
    return "\n".join(lines) + "\n"


def resolve(config, argument="config"):
    """(text_or_path, is_path) for a path (str or os.PathLike), text-format string or dict."""
    if isinstance(config, dict):
        return dict_to_text(config), False
    if isinstance(config, os.PathLike):
        return os.fspath(config), True
    if isinstance(config, str):
        # Text format has braces or "field:" pairs on its lines; a path has neither line breaks
        # nor braces.
        is_text = "\n" in config or "{" in config
        return config, not is_text
    raise TypeError(f"{argument} must be a path, a text-format string or a dict, "
                    f"not {type(config).__name__}")


def overrides_list(overrides, argument="overrides"):
    """["section.field=value", ...] from a dict (or None)."""
    if overrides is None:
        return []
    if not isinstance(overrides, dict):
        raise TypeError(f"{argument} must be a dict of 'section.field' to values, "
                        f"not {type(overrides).__name__}")
    out = []
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise TypeError(f"{argument}: keys must be 'section.field' strings, got {key!r}")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif not isinstance(value, (str, int, float)):
            raise TypeError(f"{argument}[{key!r}] must be a str, number or bool, "
                            f"not {type(value).__name__}")
        out.append(f"{key}={value}")
    return out
