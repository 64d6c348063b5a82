/* A library the broken module below needs and the loader will not find (not a test). */
int allm_fake_dep(void);

int allm_fake_dep(void)
{
	return 13;
}
