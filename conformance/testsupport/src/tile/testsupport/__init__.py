"""Test support shared by every tile package (see the README): profiles, markers, the ISA oracle."""
