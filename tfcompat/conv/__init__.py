"""Conv2DBackpropInput: the problem (problem.py), the machine (machine.py), the ordered
strategies (strategies.py) with their runners (plans.py, onednn.py) and tables (tables.py),
and a call (run.py). docs/architecture.md#the-conv-strategies says how they fit."""
from .machine import Machine, current_machine
from .strategies import STRATEGIES, ConvChoice, ConvStrategy, choose

__all__ = ["Machine", "current_machine", "STRATEGIES", "ConvChoice", "ConvStrategy", "choose"]
