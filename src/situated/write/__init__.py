"""Writing: proposals and the policies that promote them."""
