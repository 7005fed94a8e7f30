import os
import sys
import re

print(os.sep)
