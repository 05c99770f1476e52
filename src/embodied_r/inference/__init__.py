"""Model-facing pieces shared by every method: judges that grade another model's output, and their probe.

Nothing is imported here at package import time; import the submodules you need.
"""
