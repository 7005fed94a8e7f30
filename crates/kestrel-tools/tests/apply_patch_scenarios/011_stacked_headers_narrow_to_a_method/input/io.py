class Reader:
    def close(self):
        return None

class Writer:
    def close(self):
        return None
