/* Axis 1's two halos of ten 70x134x80 float64 fields (the largest benchmark case's block,
 * halo 3, axis 1 periodic and held by the rank) copied from the rank's own cells, as the
 * compiled exchange's self copies do: ten fields per loop iteration ("fused", the generated
 * loop before 2026-11-29), one loop per field ("perfield"), a memcpy per row and field.
 * docs/benchmarks.md, "Faces of whole planes; self copies per field".
 *
 * Build and run:  cc -O3 -march=native -o build/self_copy_loops benchmarks/self_copy_loops.c
 *                 build/self_copy_loops        (fields hot)
 *                 build/self_copy_loops cold   (64 MiB and the fields touched before each copy)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define NF 10
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int S0=70,S1=134,S2=80; 
__attribute__((noinline)) void fused(double**f, int s0, int s1, int n0, int n1, int L){
  double *__restrict__ f0=f[0],*__restrict__ f1=f[1],*__restrict__ f2=f[2],*__restrict__ f3=f[3],*__restrict__ f4=f[4],*__restrict__ f5=f[5],*__restrict__ f6=f[6],*__restrict__ f7=f[7],*__restrict__ f8=f[8],*__restrict__ f9=f[9];
  for(int side=0;side<2;side++){
   int dst0 = side? 3+n1 : 0; int src0 = side? 3 : n1;
   for(int h0=3;h0<3+n0;h0++) for(int h1=0;h1<3;h1++) for(int h2=0;h2<L;h2++){
    long d=(long)s0*h0+(long)s1*(dst0+h1)+h2, s=(long)s0*h0+(long)s1*(src0+h1)+h2;
    f0[d]=f0[s];f1[d]=f1[s];f2[d]=f2[s];f3[d]=f3[s];f4[d]=f4[s];f5[d]=f5[s];f6[d]=f6[s];f7[d]=f7[s];f8[d]=f8[s];f9[d]=f9[s];}}
}
__attribute__((noinline)) void perfield(double**f, int s0, int s1, int n0, int n1, int L){
  for(int side=0;side<2;side++){
   int dst0 = side? 3+n1 : 0; int src0 = side? 3 : n1;
   for(int j=0;j<NF;j++){ double*__restrict__ a=f[j];
   for(int h0=3;h0<3+n0;h0++) for(int h1=0;h1<3;h1++) for(int h2=0;h2<L;h2++){
    long d=(long)s0*h0+(long)s1*(dst0+h1)+h2, s=(long)s0*h0+(long)s1*(src0+h1)+h2; a[d]=a[s];}}}
}
__attribute__((noinline)) void rowmemcpy(double**f, int s0, int s1, int n0, int n1, int L){
  for(int side=0;side<2;side++){
   int dst0 = side? 3+n1 : 0; int src0 = side? 3 : n1;
   for(int h0=3;h0<3+n0;h0++) for(int j=0;j<NF;j++){ double*a=f[j];
    memcpy(a+(long)s0*h0+(long)s1*dst0, a+(long)s0*h0+(long)s1*src0, sizeof(double)*3*L);}}
}
__attribute__((noinline)) void bothsides(double**f, int s0, int s1, int n0, int n1, int L){
   for(int j=0;j<NF;j++){ double*a=f[j];
   for(int h0=3;h0<3+n0;h0++){ double*r=a+(long)s0*h0;
    memcpy(r, r+(long)s1*n1, sizeof(double)*3*L);
    memcpy(r+(long)s1*(3+n1), r+(long)s1*3, sizeof(double)*3*L);}}
}
int main(int argc,char**argv){
  int cold=argc>1;
  double*f[NF]; long n=(long)S0*S1*S2; for(int j=0;j<NF;j++){f[j]=aligned_alloc(64,n*8); for(long i=0;i<n;i++) f[j][i]=i+j;}
  long big=64L<<20; char*junk=malloc(big); memset(junk,1,big);
  void (*fn[])(double**,int,int,int,int,int)={fused,perfield,rowmemcpy,bothsides}; const char*nm[]={"fused","perfield","rowmemcpy","bothsides"};
  double best[4]={0};
  for(int rep=0;rep<200;rep++) for(int v=0;v<4;v++){
    if(cold){ for(long i=0;i<big;i+=64) junk[i]++; for(int j=0;j<NF;j++) for(long i=0;i<n;i+=8) f[j][i]+=1; }
    double t=now(); fn[v](f,S1*S2,S2,64,128,S2); t=now()-t; best[v]+=t; }
  for(int v=0;v<4;v++) printf("%s %.1f us\n",nm[v],1e6*best[v]/200);
}
