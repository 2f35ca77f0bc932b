#!/usr/bin/env python3
"""torchrun (torch.distributed.run), unchanged but for one fix: Debian bookworm's PyTorch 1.13
under Python 3.11 cannot parse its own --redirects/--tee default ("0"): Std.from_str iterates the
IntFlag, which from Python 3.11 on leaves out the zero member, and every launch fails with
"'NoneType' object has no attribute 'get'". Same arguments as torchrun.
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def from_str(vm):
    if re.fullmatch(r"\d", vm):
        return api.Std(int(vm))
    return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}


api.Std.from_str = staticmethod(from_str)

from torch.distributed import run  # noqa: E402

if __name__ == "__main__":
    sys.exit(run.main())
