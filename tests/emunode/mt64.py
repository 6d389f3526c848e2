"""std::mt19937_64 in Python, written from the C++ standard's definition ([rand.eng.mt] and
[rand.predef]: w=64, n=312, m=156, r=31, a=0xb5026f5aa96619e9, u=29, d=0x5555555555555555, s=17,
b=0x71d67fffeda60000, t=37, c=0xfff7eee000000000, l=43, f=6364136223846793005), not from
gdrpeer's code: the host side of the two-node tests recomputes the bytes `gdrpeer verify` puts
in memory from the seed alone and looks for them in the BAR files. The standard's own check
value (the 10000th output of a default-constructed engine is 9981545732273789042) is asserted
by tests/test_emunode_pair.py."""

N, M = 312, 156
MASK = (1 << 64) - 1
UPPER, LOWER = MASK & ~((1 << 31) - 1), (1 << 31) - 1
A = 0xB5026F5AA96619E9
DEFAULT_SEED = 5489


class MT19937_64:
    def __init__(self, seed=DEFAULT_SEED):
        mt = [seed & MASK]
        for i in range(1, N):
            mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & MASK)
        self.mt, self.i = mt, N

    def _twist(self):
        mt = self.mt
        for k in range(N):
            y = (mt[k] & UPPER) | (mt[(k + 1) % N] & LOWER)
            mt[k] = mt[(k + M) % N] ^ (y >> 1) ^ (A if y & 1 else 0)
        self.i = 0

    def __call__(self):
        if self.i >= N:
            self._twist()
        y = self.mt[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y
