"""codegen (to be filled in by its issue)"""
