/* AdaptiveLLM-C public version macros. The client API (client.h) and the wire
 * protocol (protocol.h) join this folder with the serving daemon. */
#ifndef ADAPTIVELLM_VERSION_H
#define ADAPTIVELLM_VERSION_H

#define ADAPTIVELLM_VERSION_MAJOR 0
#define ADAPTIVELLM_VERSION_MINOR 2
#define ADAPTIVELLM_VERSION_PATCH 0
#define ADAPTIVELLM_VERSION_STRING "0.2.0"

#endif
