/* A CUDA backend module that cannot load: it needs libnotthere.so.13, which is on no
 * library path at run time (not a test by itself; cuda-module-missing.sh). */
int allm_fake_dep(void);
int allm_fake_module(void);

int allm_fake_module(void)
{
	return allm_fake_dep();
}
