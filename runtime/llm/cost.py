"""Usage and its price: Pi's `usage` object and `calculateCost`."""

from __future__ import annotations

USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite")


def empty_usage() -> dict:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def _price(prices: dict, key: str) -> float:
    value = prices.get(key) if prices else None
    if value is None or isinstance(value, bool):
        return 0
    return value


def compute_cost(usage: dict, prices: dict) -> dict:
    """Fill `usage["cost"]` from prices in USD per million tokens; return the cost dict.

    Same arithmetic, in the same order, as Pi's `calculateCost`, so the floats match.
    Missing prices count as 0.
    """
    cost = usage.get("cost")
    if not isinstance(cost, dict):
        cost = usage["cost"] = {}
    cost["input"] = (_price(prices, "input") / 1000000) * usage.get("input", 0)
    cost["output"] = (_price(prices, "output") / 1000000) * usage.get("output", 0)
    cost["cacheRead"] = (_price(prices, "cacheRead") / 1000000) * usage.get("cacheRead", 0)
    long_writes = usage.get("cacheWrite1h") or 0
    if long_writes:  # 1-hour cache writes at their own price (Anthropic: twice the input price)
        long_price = prices.get("cacheWrite1h") if prices and prices.get("cacheWrite1h") is not None else 2 * _price(prices, "input")
        short = (_price(prices, "cacheWrite") / 1000000) * (usage.get("cacheWrite", 0) - long_writes)
        cost["cacheWrite"] = short + (long_price / 1000000) * long_writes
    else:
        cost["cacheWrite"] = (_price(prices, "cacheWrite") / 1000000) * usage.get("cacheWrite", 0)
    cost["total"] = cost["input"] + cost["output"] + cost["cacheRead"] + cost["cacheWrite"]
    return cost


def set_usage(usage: dict, prices: dict, *, input: int, output: int, cache_read: int, cache_write: int, cache_write_1h: int = 0) -> None:
    """Overwrite the token counts, recompute `totalTokens` (sum of the four) and the cost.
    ``cache_write_1h``: how many of the cache writes were 1-hour ones (kept as
    ``cacheWrite1h`` when any, and priced at ``prices["cacheWrite1h"]``, else twice the input
    price; Pi's usage has one cache-write count and price)."""
    usage["input"] = input
    usage["output"] = output
    usage["cacheRead"] = cache_read
    usage["cacheWrite"] = cache_write
    if cache_write_1h:
        usage["cacheWrite1h"] = min(cache_write_1h, cache_write)
    else:
        usage.pop("cacheWrite1h", None)
    usage["totalTokens"] = input + output + cache_read + cache_write
    compute_cost(usage, prices)
