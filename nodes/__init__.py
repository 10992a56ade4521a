"""ComfyUI node classes of the pack (thin wrappers over ltx2_core). The node set arrives with the nodes issue."""

NODE_CLASS_MAPPINGS: dict[str, type] = {}
NODE_DISPLAY_NAME_MAPPINGS: dict[str, str] = {}
