"""Bisections: from a good and a bad commit to the first commit that changed a
cell, through ordinary adaptive experiments (`services` writes, `steps` queues and reads
one step, `report` tells what was found)."""
