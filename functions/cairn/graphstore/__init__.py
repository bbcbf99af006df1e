"""LangGraph's long-term store on an address: namespaced JSON items, with TTLs and version-checked puts."""
