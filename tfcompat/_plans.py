"""The cython backend's one bounded cache: resampling plans, and the tables a conv's shapes
alone decide (docs/architecture.md)."""
import threading

MAX_PLANS = 256
MAX_PLAN_BYTES = 64 << 20


class PlanCache:
    """At most ``max_plans`` plans holding at most ``max_bytes`` bytes of tables; a plan larger
    than that is not kept, and the oldest plans make room for a new one. Lookups take no
    lock; insertions do."""

    def __init__(self, max_plans=MAX_PLANS, max_bytes=MAX_PLAN_BYTES):
        self.max_plans, self.max_bytes = max_plans, max_bytes
        self.plans = {}
        self.nbytes = 0
        self._lock = threading.Lock()

    def get(self, key):
        return self.plans.get(key)

    def get_or_make(self, key, make):
        """The plan under ``key``, made by ``make()`` and kept the first time."""
        plan = self.plans.get(key)
        if plan is None:
            plan = make()
            self.put(key, plan)
        return plan

    def put(self, key, plan):
        if plan.nbytes > self.max_bytes:
            return
        with self._lock:
            if key in self.plans:
                return
            while self.plans and (len(self.plans) >= self.max_plans
                                  or self.nbytes + plan.nbytes > self.max_bytes):
                self.nbytes -= self.plans.pop(next(iter(self.plans))).nbytes
            self.plans[key] = plan
            self.nbytes += plan.nbytes

    def clear(self):
        with self._lock:
            self.plans.clear()
            self.nbytes = 0


PLANS = PlanCache()
