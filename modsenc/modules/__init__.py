"""Per-language modules: bundles on disk (bundle), the modular backbone (modular), export."""
