// The compiled `shm` exchange's copies alone (gt4py_halo_shm::copy_rows_of), for
// benchmarks/shm_copies.py, which writes the rows and builds this against a header folder.
//
//   shm_copies ROWS FIELDS REPEATS LOCKSTEP: ROWS a file "X Y Z N" then N rows of 9 numbers
//   (a box's start here, shape, start there); FIELDS float64 C-ordered fields of X x Y x Z;
//   LOCKSTEP the longest runs copied in lockstep (bytes); prints the median seconds of the
//   copies of all rows of all fields, over REPEATS.
#include "gt4py_halo_shm.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char** argv) {
    if (argc != 5) return 2;
    FILE* file = fopen(argv[1], "r");
    long X, Y, Z, n;
    if (file == nullptr || fscanf(file, "%ld %ld %ld %ld", &X, &Y, &Z, &n) != 4) return 2;
    std::vector<long> rows(9 * n);
    for (long& word : rows)
        if (fscanf(file, "%ld", &word) != 1) return 2;
    const int count = atoi(argv[2]), repeats = atoi(argv[3]);
    const long lockstep = atol(argv[4]);
    std::vector<std::vector<double>> data(count, std::vector<double>(X * Y * Z));
    std::vector<gt4py_halo_shm::Field> fields;
    for (auto& values : data) {
        for (size_t k = 0; k < values.size(); ++k) values[k] = (double)k;
        fields.push_back({(char*)values.data(), 3, 8, {X, Y, Z}, {Y * Z * 8, Z * 8, 8}});
    }
    std::vector<double> seconds;
    for (int r = 0; r < repeats; ++r) {
        double start = now();
        for (auto& f : fields)
            gt4py_halo_shm::copy_rows_of(f, f.data, f.strides, rows.data(), n, 3, lockstep);
        seconds.push_back(now() - start);
    }
    std::sort(seconds.begin(), seconds.end());
    printf("%.4e\n", seconds[seconds.size() / 2]);
    return 0;
}
