"""What a generation holds where: the modules that visit the device only for their stage (`offload`), the bytes of
the modules beside the transformer (`sizes`) and the memory free now on the device and the host, under the
process's limits (`sizes`). The plan itself (the weights): `ltx2_core.memory.plan`, over the byte counts it adds up
(`estimates`); what a whole request allocates beyond them, stage by stage (`footprint`), and the check of it against
the free memory (`request_check`).
"""
