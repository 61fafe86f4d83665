"""What a chapter needs around its code: :mod:`setup` prepares the kernel (seeds, one thread, the pinned numerics,
the figures' renderer; ``energylab.setup_notebook``), :mod:`prose` computes every number the prose quotes, and
:mod:`prose_check` finds numbers typed into the prose. ``prose`` and ``prose_check`` import no torch (the build
scripts use them)."""
