/* A stand-in for the NVIDIA driver's libcuda.so.1 (not a test by itself): cuInit
 * succeeds and one device is "present", so the backend goes on to load its module.
 * cuda-module-missing.sh uses it to play a GPU machine whose module cannot load. */
int cuInit(unsigned flags);
int cuDeviceGetCount(int *n);

int cuInit(unsigned flags)
{
	return 0;
}

int cuDeviceGetCount(int *n)
{
	*n = 1;
	return 0;
}
