"""What the hardware is: GPU models (``gpus``) and MIG geometry (``mig``).

Facts only, no policy: memory and MIG capability per GPU model, the GPU-instance profiles
and legal placements of each MIG-capable model, and the mig-parted config format. The base
of the house: imports nothing from ``scaler`` but itself.
"""
