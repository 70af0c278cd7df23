import numpy as np

a = np.arange(12, dtype=np.float64).reshape(3, 4)
print("numpy", np.__version__, "sum", a.sum(), "det", round(np.linalg.det(np.eye(3) * 2.0), 6))
