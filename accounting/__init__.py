"""Privacy mechanisms and accountants: noise std <-> (eps, delta), as the papers state it and tight."""
