/* A stand-in for Windows' bcryptprimitives.dll, for running Rust programs
 * under wine 8.0 in tests only (scripts/test-windows puts it in the test
 * wine prefix; it never ships). Rust's std imports ProcessPrng from it
 * (Windows 10 and later); wine 8.0 has no such DLL, so a program would not
 * start. ProcessPrng fills a buffer with random bytes from the system's
 * generator, as RtlGenRandom (advapi32's SystemFunction036) does. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG n = length > 0x7fffffff ? 0x7fffffff : (ULONG)length;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        length -= n;
    }
    return TRUE;
}
