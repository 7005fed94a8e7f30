import os
import re

print(os.sep)
