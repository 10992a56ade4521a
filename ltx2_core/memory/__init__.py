"""What a generation holds where: the modules that visit the device only for their stage (`offload`), the bytes of
the modules beside the transformer (`sizes`) and the machine's RAM (`host`). The plan itself: `ltx2_core.memory.plan`.
"""
